"""Live push: the WebSocket consumer, the one sender, the channel layers, the routing."""
