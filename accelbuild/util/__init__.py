"""Small shared helpers: atomic files and content digests."""
