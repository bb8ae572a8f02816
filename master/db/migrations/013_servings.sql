-- Translation servers scheduled on the cluster (docs/serving.md "On the cluster";
-- master/serving/serving.h). Each is carried by an experiment of its own, whose one trial is the
-- sf-serve process; this row says which model version it serves and where it answers.
--
-- The model is recorded by name, id and version number, not by a foreign key: a server's history
-- outlives the model version it served (deleting the version is refused only while it is
-- registered, not because it was once served).
CREATE TABLE servings (
  experiment_id   BIGINT PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,
  model_id        BIGINT NOT NULL,
  model_name      TEXT NOT NULL,
  model_version   INT NOT NULL,
  checkpoint_uuid TEXT NOT NULL,
  slots           INT NOT NULL,
  resource_pool   TEXT NOT NULL,
  -- Where the server answers, as its task reported it (TrialLink ReportEndpoint), and the
  -- allocation that reported it: the URL is current only while that allocation runs.
  url             TEXT NOT NULL DEFAULT '',
  url_allocation  TEXT NOT NULL DEFAULT '',
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
