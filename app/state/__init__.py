"""The app's own settings and the lock that says which window owns the data folder."""
