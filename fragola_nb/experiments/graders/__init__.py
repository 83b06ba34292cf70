"""Graders (the public face is ``fragola_nb.graders``): ``base`` the rules (``Grade``,
``GradedRow``, what a grader may return), ``values`` the checks of the values they give,
``builtins`` and ``trajectory`` the built-in graders, ``judge`` a model as a grader, ``apply``
and ``stop`` applying them to rows (and stopping the judges' calls with the run)."""
