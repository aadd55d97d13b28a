"""Exceptions: one class per C status (include/cortiq/status.h), all under cortiq.Error.

Every exception carries the C status as `code` (the pinned number), `status` (its short name,
"Parse", "Hash", ...) and the library's message, which names the file, the value and the rule.
Where a Python built-in means the same thing the class derives from it too, so
`except FileNotFoundError`-style code keeps working: IOFailure is an OSError, InvalidArgument a
ValueError, NotFound a LookupError, NoMemory a MemoryError.
"""
from __future__ import annotations


class Error(Exception):
    """Base of every error this package raises."""

    code = 0
    status = "OK"

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class FormatError(Error):
    """The bytes break a rule of the CMF v2 spec (magic, version, bounds, JSON, hashes...)."""


class InvalidMagic(FormatError):
    code, status = 1, "InvalidMagic"


class UnsupportedVersion(FormatError):
    code, status = 2, "UnsupportedVersion"


class UnsupportedFeature(FormatError):
    code, status = 3, "UnsupportedFeature"


class BoundsError(FormatError):
    code, status = 4, "Bounds"


class ParseError(FormatError):
    code, status = 5, "Parse"


class HashMismatch(FormatError):
    code, status = 6, "Hash"


class IOFailure(Error, OSError):
    code, status = 7, "IO"


class NoMemory(Error, MemoryError):
    code, status = 8, "OutOfMemory"


class InvalidArgument(Error, ValueError):
    code, status = 9, "InvalidArgument"


class NotFound(Error, LookupError):
    code, status = 10, "NotFound"


class Unsupported(Error):
    code, status = 11, "Unsupported"


class DtypeError(Unsupported, TypeError):
    """A numpy dtype or a CMF dtype this operation cannot take."""


class ShardError(FormatError):
    code, status = 12, "Shard"


class LimitError(Error):
    code, status = 13, "Limit"


class NetworkError(Error):
    code, status = 14, "Network"


_BY_CODE = {c.code: c for c in (InvalidMagic, UnsupportedVersion, UnsupportedFeature,
                                BoundsError, ParseError, HashMismatch, IOFailure, NoMemory,
                                InvalidArgument, NotFound, Unsupported, ShardError, LimitError,
                                NetworkError)}


def from_status(code: int, message: str) -> Error:
    """The exception for a C status and its message."""
    cls = _BY_CODE.get(int(code))
    if cls is None:
        e = Error(message, int(code))
        e.status = f"status {int(code)}"
        return e
    return cls(message)
