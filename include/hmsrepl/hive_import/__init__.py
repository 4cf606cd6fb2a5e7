"""Adopting an existing warehouse: read a stock Hive Metastore over Thrift and create its catalog here.

``reader`` speaks to any Hive Metastore's read calls (Hive 2.3 and later); ``importer`` creates what it
reads in an hmsrepl metastore, in place (same files: the usual cutover) or with the data copied into this
metastore's warehouse; ``compare`` says whether the two catalogs agree afterwards.
"""
