"""Node kinds of Metagen Studio and the pure meta-generation algorithms behind them."""
