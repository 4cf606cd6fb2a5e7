"""Pure, I/O-free codecs for Hive's string and file formats."""
