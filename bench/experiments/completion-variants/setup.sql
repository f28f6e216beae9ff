-- setup: a table of finished jobs (primary key only), where the `move` variant puts them.
CREATE TABLE finished_jobs (LIKE evora.jobs INCLUDING DEFAULTS, PRIMARY KEY (id))
