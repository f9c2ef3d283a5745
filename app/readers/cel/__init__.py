"""DRA device selectors evaluated the way the scheduler evaluates them."""
