"""Files a user points placetune at: one read path, one write path, one folder guard, confined names.

* :mod:`placetune.files.read`: every user file is read here: regular files only (or ``-`` for
  standard input), a size cap per kind, bounded gzip decompression; FIFOs and devices are
  refused at once, without blocking on ``open``.
* :mod:`placetune.files.write`: every user-visible file is written here: a regular file is
  replaced atomically; a symlink, a character device, a FIFO or ``/dev/stdout`` is written
  *through* (never replaced); block devices, sockets, directories and dangling links are refused.
* :mod:`placetune.files.folder`: folders placetune fills (a plan folder, a report, a selftest
  report) overwrite only files placetune wrote there and nobody changed since.
* :mod:`placetune.files.names`: names that come from data (a study, an engine index, a file
  name in a plan) become file names only when they stay inside their folder.
"""

from placetune.files.folder import OutputFolder
from placetune.files.names import confined, file_name
from placetune.files.read import LIMITS, check_regular, open_regular, read_bytes, read_gzip, read_text
from placetune.files.write import check_output, write_file

__all__ = ["LIMITS", "open_regular", "read_bytes", "read_gzip", "read_text", "check_regular", "check_output",
           "write_file", "OutputFolder", "confined", "file_name"]
