-- Webhooks (docs/webhooks.md; master/webhooks/webhooks.h): a signed JSON POST to a URL when an
-- experiment changes state.
--
-- webhook_deliveries is an outbox: the trigger below writes one row per subscribed webhook in
-- the SAME transaction as the experiment's state change (Store::SetExperimentState, or the
-- INSERT of a new experiment), so an event is stored exactly when the change is, and the
-- coordinator never waits for a receiver. The master's dispatcher threads send the rows
-- (at least once, retried with backoff) and record each attempt.
--
-- `secret` is the HMAC key the deliveries are signed with; it must be readable to sign, so it
-- is stored as given to its creator (shown once, never returned again).
CREATE TABLE webhooks (
  id              BIGSERIAL PRIMARY KEY,
  url             TEXT NOT NULL,
  events          TEXT[] NOT NULL,                -- experiment states: 'COMPLETED', 'ERROR', ...
  -- NULL: every experiment (an admin's webhook: sent while its owner is an active admin).
  experiment_id   BIGINT REFERENCES experiments(id) ON DELETE CASCADE,
  secret          TEXT NOT NULL,
  owner           TEXT NOT NULL DEFAULT '',       -- the creator's name
  owner_user_id   BIGINT REFERENCES users(id) ON DELETE CASCADE,  -- NULL: made without auth
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_experiment_idx ON webhooks (experiment_id);
CREATE INDEX webhooks_owner_idx ON webhooks (owner);

-- One event for one webhook. Pending while delivered_at and failed_at are both NULL; the
-- dispatcher claims a pending row whose next_attempt_at has come by moving next_attempt_at past
-- the attempt's deadline (a lease: a master that dies mid-attempt leaves it to be sent again).
CREATE TABLE webhook_deliveries (
  id              UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  webhook_id      BIGINT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  event_type      TEXT NOT NULL,                  -- 'experiment.state_changed' | 'ping'
  payload         JSONB NOT NULL,                 -- the body without its "id"
  attempts        INT NOT NULL DEFAULT 0,
  next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  last_status     INT NOT NULL DEFAULT 0,         -- the last answer's HTTP status; 0: none
  last_error      TEXT NOT NULL DEFAULT '',
  delivered_at    TIMESTAMPTZ,
  failed_at       TIMESTAMPTZ,                    -- given up after the last attempt
  created_at      TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (next_attempt_at)
  WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, created_at DESC);

-- Every attempt, as it ended.
CREATE TABLE webhook_delivery_attempts (
  delivery_id     UUID NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  attempt         INT NOT NULL,
  sent_at         TIMESTAMPTZ NOT NULL,
  duration_ms     INT NOT NULL,
  status_code     INT NOT NULL DEFAULT 0,         -- 0: no answer
  error           TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (delivery_id, attempt)
);

-- RFC 3339 in UTC with microseconds: 2026-11-24T16:01:00.123456Z.
CREATE FUNCTION webhook_time(t TIMESTAMPTZ) RETURNS TEXT LANGUAGE sql STABLE AS $$
  SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- The outbox writer: an experiment's new state, for every webhook subscribed to it.
CREATE FUNCTION webhook_experiment_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  queued INT;
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.state IS NOT DISTINCT FROM NEW.state THEN
    RETURN NULL;
  END IF;
  INSERT INTO webhook_deliveries (webhook_id, event_type, payload)
  SELECT w.id, 'experiment.state_changed', jsonb_build_object(
           'type', 'experiment.state_changed',
           'occurred_at', webhook_time(now()),
           'experiment', jsonb_build_object(
             'id', NEW.id,
             'name', NEW.name,
             'state', NEW.state,
             'previous_state', CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END,
             'owner', NEW.owner,
             'workspace', (SELECT name FROM workspaces WHERE id = NEW.workspace_id),
             'error', NEW.error,
             'start_time', webhook_time(NEW.start_time),
             'end_time', CASE WHEN NEW.end_time IS NOT NULL THEN webhook_time(NEW.end_time) END))
  FROM webhooks w
  LEFT JOIN users u ON u.id = w.owner_user_id
  WHERE NEW.state = ANY (w.events)
    AND (w.owner_user_id IS NULL OR u.active)
    AND (w.experiment_id = NEW.id
         OR (w.experiment_id IS NULL AND (w.owner_user_id IS NULL OR u.role = 'admin')));
  GET DIAGNOSTICS queued = ROW_COUNT;
  IF queued > 0 THEN
    PERFORM pg_notify('sf_webhook_deliveries', '');  -- wakes the dispatcher at commit
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER experiments_webhook_events
  AFTER INSERT OR UPDATE OF state ON experiments
  FOR EACH ROW EXECUTE FUNCTION webhook_experiment_event();
