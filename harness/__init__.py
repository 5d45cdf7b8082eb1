"""What the tests and the benchmarks both run: the distributed stack started as the Makefile
starts it (`stack`) and a small WebSocket client (`wsclient`). Outside tests/ so that bench/
never imports the test suite."""
