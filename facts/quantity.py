"""Kubernetes resource quantities (`256`, `500m`, `1Ti`, `1e3`) as numbers (pure).

Grammar and suffixes from k8s.io/apimachinery `pkg/api/resource/quantity.go` (also the CRDs' quantity
pattern): binary suffixes Ki..Ei are powers of 1024, decimal ones n, u, m, k, M..E powers of 1000, and an
exponent `e<n>`/`E<n>` a power of ten.
"""

import re
from decimal import Decimal

QUANTITY_PATTERN = (
    r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?"
)
_QUANTITY = re.compile(
    r"(?P<number>(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+)))"
    r"(?P<suffix>([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(text: str) -> Decimal:
    """The value of a quantity (`500m` -> 0.5, `1Gi` -> 1073741824); `ValueError` if it is none."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    number, suffix = Decimal(match["number"]), match["suffix"] or ""
    if suffix in _BINARY:
        return number * Decimal(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Decimal(10) ** _DECIMAL[suffix]
    return number * Decimal(10) ** Decimal(suffix[1:])
