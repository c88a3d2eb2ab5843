"""nbaccel's version, in a module of its own at the bottom of the layers: the disk cache's version
name, an exported program's and a checkpoint's header read it without importing the package."""
__version__ = "0.1.0"
