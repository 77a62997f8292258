"""The event classes of `legato.events` by family; import them from `legato.events`.

`legato.events` holds the run's own events, the unions and the `Journal`; the effect
gate's, the typed state's and the sub-agents' events are defined in this package.
"""
