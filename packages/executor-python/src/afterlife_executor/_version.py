"""The kit's version: the contract's major.minor, as the TypeScript kit's KIT_VERSION (the plane checks both)."""

__version__ = "0.1.0"
