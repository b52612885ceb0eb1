"""What every call is, whichever provider carries it: the seam the providers' wings plug into.

Nothing here names a provider. A wing (`pipeline.realtime`, `pipeline.live`) says what its
provider can do in a `Capabilities` literal; the neutral rules ask those, never which provider
they serve. Beside the seam, what every call has whatever its provider: the one error tree
(`errors`), every limit (`limits`), and the tools a model may call and their durable steps
(`catalog`, `tool_steps`). The session's own vocabulary, which names the wings' parts, is
`pipeline.session`.
"""
