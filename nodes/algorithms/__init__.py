"""Pure meta-generation algorithms the node kinds use: voting, MBR, extraction, search bookkeeping and the
python sandbox."""
