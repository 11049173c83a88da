"""The token ledger: one line per completed ask, one file per host, totals for the fleet."""
