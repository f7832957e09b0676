"""``verishape.export`` and what it adds to a stock export: proved premises checked in the
program, proved reasons for constraint violations, proved ``torch._check`` suggestions."""
