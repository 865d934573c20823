"""The client-side commands of ``neuralmind``: every one goes through
:class:`neuralmind.client.NeuralMindClient` to the daemon, never to the stores."""
