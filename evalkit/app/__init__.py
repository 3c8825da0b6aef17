"""The front doors: the command line (one module per subcommand), the notebook parameters and runner, and plugin
loading. Each turns what a user gives into calls of :mod:`evalkit.runs`, the layer below it."""
