"""What more than one suite shares; no test module imports another (tests/unit/test_layers.py)."""
