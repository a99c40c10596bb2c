"""The one usage-error type of the search driver."""

from __future__ import annotations

from moeopt.errors import InputError
from moeopt.fields import Fields


class StudyError(InputError):
    """A study file, a command-line value or a storage does not allow the study to run.

    The message is one line that names the place (file and field), the value, and what is
    allowed; the command-line entry point prints it and exits with status 2.
    """


FIELDS = Fields(StudyError, quote_choices=False)
"""The checks of a study file's fields (see :mod:`moeopt.fields`): names are listed bare."""
