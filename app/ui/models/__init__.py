"""The Models page (Qt): search the Hub, fit estimates, the download queue, the library.

Import the page from app.ui.models.page (ModelsPage); the views are its parts.
"""
