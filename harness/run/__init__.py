"""One run and a campaign of them: configuration, the run's lifecycle, client
workers, phases, the live progress view."""
