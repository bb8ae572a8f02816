-- Every mutation of the REST API (docs/security.md, "Audit log"): who (the caller's user name;
-- until users exist, what X-SF-User says, or 'anonymous'), from where (the peer address), what
-- (method and path), when, and how it ended (the HTTP status).
CREATE TABLE audit_log (
  id              BIGSERIAL PRIMARY KEY,
  at              TIMESTAMPTZ NOT NULL DEFAULT now(),
  actor           TEXT NOT NULL,
  peer            TEXT NOT NULL,
  method          TEXT NOT NULL,
  path            TEXT NOT NULL,
  status          INT NOT NULL
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC, id DESC);
