"""The thin top of airsspec memory: the workspace facade (``workspace``), settings loaded from
``airsspec.toml`` (``settings``) and the ``airsspec`` command line (``cli``)."""
