"""Exceptions raised by dpaudit. Each subclasses the nearest built-in and names the bad value."""

from __future__ import annotations


class DPAuditError(Exception):
    """Base class of every error dpaudit raises on purpose."""


class InvalidParameterError(DPAuditError, ValueError):
    """A parameter is outside its allowed range; the message names it, its value and what is allowed."""


class UnknownNameError(DPAuditError, KeyError):
    """An unknown allocation id, geolevel, universe, query or method."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class SpecError(DPAuditError, ValueError):
    """An audit spec failed validation."""


class AccountingError(DPAuditError, ArithmeticError):
    """An accountant cannot give a certified answer for the request (and says why)."""


class StoreError(DPAuditError, RuntimeError):
    """A result store is missing, malformed, misaligned or already in use."""


class IntegrityError(StoreError):
    """A stored array is missing, unreadable or does not match the checksum recorded when written."""
