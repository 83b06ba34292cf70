"""``agent.batch(..., backend=RayBackend(...))``: a batch run by Ray workers (the ``ray``
extra, the one home of ``ray``). ``backend`` is what the user gives, ``connect`` starts or joins
Ray (a local Ray listens on loopback only), ``run`` hands out the rows and gathers them,
``worker`` runs rows on a worker; ``evaluate`` runs ``agent.evaluate``'s rows as batches there.
"""
