"""``python -m nxgates`` runs the same CLI as the ``nxgates`` console script."""

from nxgates.cli import main

if __name__ == "__main__":
    main()
