"""``python -m fedsweep.bench``: ``make bench`` (:func:`fedsweep.bench.command.main`)."""

from fedsweep.bench.command import main

if __name__ == "__main__":
    main()
