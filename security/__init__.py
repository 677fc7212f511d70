"""groupd.security: who may connect and what they may do.

Owns listeners and TLS (``listeners.py``), SASL PLAIN and SCRAM authentication (``auth.py``, with the
credential store and the SCRAM arithmetic in ``scram.py``) and ACLs (``acl.py``, wrappers around the
dispatcher's handlers; the broker's API table says which API gets which). It works on requests and principals only: it knows nothing of group
semantics, topics' contents or files, and never imports the broker that wires it in (settings come in
as a structural ``ListenerSettings``).
"""
