"""The web side's app: the domain (the admin's concepts: rounds, plans, migrations, maintenance, …),
what admins see (pages/, api/, live/) and the models. The Django project that serves it (settings,
URLs, ASGI, Celery) is the `project` package."""
