"""What a secret looks like, and masking it: the one home for secret patterns.

Shared by the capabilities' redaction (``scrubbing.scrub``: log lines, conf values, bug
drafts, every prompt block) and by the indexer's masking of tracked documents
(``documents.mask_secrets``: a secret committed by mistake must never be embedded, since a
vector cannot be cleaned afterwards).

A secret is a value, found where homelab repositories hold them:

* values under secret-named keys (``values.key_role``: PASSWORD, TOKEN, SECRET, PSK, PIN,
  API_KEY...) in env, compose, YAML (block and folded scalars too), INI, TOML and JSON, org
  property drawers and front matter, and the items of their lists (``- item``, a JSON
  array, ``[a, b]``); a weak name (bare ``key``, ``auth``, ``cookie``) only with a value
  that looks like a password;
* ``directive value`` config lines under secret-named directives (redis.conf ``requirepass``,
  keepalived ``auth_pass``, msmtp ``password``), Redis ACL ``>password`` rules;
* credentials in URLs (an empty user, ``@`` in the password), htpasswd and crypt hashes, PEM
  private keys, ``Bearer``/``Basic`` headers, passwords on command lines (``mysql -pX``,
  ``redis-server --requirepass X``, ``redis-cli -a X``);
* token shapes: detect-secrets' maintained per-vendor patterns (AWS, GitHub, GitLab, Slack,
  Stripe, OpenAI, JWT, PyPI, npm, SendGrid, Telegram, Discord...) plus a few of our own;
* long high-entropy strings (``shapes.looks_random``) that are no name, digest, id or public
  key.

Not secrets: key names, references (``${VAR}``, ``{{ .Values.x }}``, ``#{ENV[..]}``,
``secretKeyRef``, vault paths), placeholders, command-line options, URLs without credentials,
durations, addresses, names of the place a secret is kept (a key its comment calls a name),
certificates and public keys. ``tests/security/masking_shapes.py``
holds the table of shapes (README.md shows it), tested row by row in both directions.

The modules, each importing only those above it:

* ``shapes``: the patterns of secret shapes both users share, ``token_shapes`` (detect-secrets,
  imported on first use), entropy, ``mask_url_credentials``;
* ``values``: which keys name a secret (``key_role``) and which values are none (references,
  placeholders, durations, names) or made up for documentation (``example_looking``);
* ``layout``: where a line of a document stands (code block, front matter, drawer, prose,
  an item of a secret-named key's list);
* ``blocks``: secrets over several lines (PEM private keys, YAML block scalars);
* ``documents``: one line at a time, and ``mask_secrets``;
* ``scrubbing``: ``scrub``, the redaction of logs and prompts (the documents' rules first,
  then stricter ones).

The re-chunk stamp (``varaverk.documents.stamp``) reads every module of this package: a change
to what is masked re-chunks every document.
"""
