"""The core every other layer stands on: settings, the database engine and tables, migrations, logging and
password hashing. Nothing here imports from the web, the services, the executors or the content."""
