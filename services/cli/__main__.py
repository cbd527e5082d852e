"""``python -m services.cli``: the ``nevis`` command run by a given interpreter (the local
backend starts workers this way, so they need no ``nevis`` on ``PATH``)."""

from services.cli.main import main

if __name__ == "__main__":
    main()
