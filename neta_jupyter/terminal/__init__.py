"""The parts of the terminal client (``neta-jupyter run``): where runs live, how they are shown.

``backends`` starts and follows a run (embedded in this process, or on a Jupyter server);
``follow`` feeds its events to a renderer and answers what the run asks; ``live`` draws it with
rich on a terminal (``cli_render`` writes plain lines and JSON); ``local_kernel`` is the kernel an
embedded run's Python runs in; ``config`` reads the Jupyter config files a server would.
"""
