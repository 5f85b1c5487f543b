"""Example Prism app: parcel shipping quotes."""
