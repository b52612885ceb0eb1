"""What every call is, whichever provider carries it: the seam the providers' wings plug into.

Nothing here names a provider. A wing (`pipeline.realtime`, `pipeline.live`) says what its
provider can do in a `Capabilities` literal; the neutral rules ask those, never which provider
they serve.
"""
