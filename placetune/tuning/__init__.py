"""Tuning: the evaluator, objectives, tuning runs (local and fleet), study files and progress lines."""

from placetune.tuning.evaluator import Evaluator, EvaluatorStats
from placetune.tuning.objectives import Objective, get_objective

__all__ = ["Evaluator", "EvaluatorStats", "Objective", "get_objective"]
