"""Test double of PyCUDA: only the subset placetune's worker uses (see driver.py)."""

VERSION = (2022, 2, 2)
VERSION_TEXT = "2022.2.2-fake"
