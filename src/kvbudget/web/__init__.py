"""``kvbudget serve``: a local web page and JSON API on the library (``app.create_app``); needs ``kvbudget[web]``."""
