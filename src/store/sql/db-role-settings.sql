-- name: dbRoleSettings
-- The inputs of dbRoleEnsure (db-role-ensure.sql, a DO block, which takes no parameters),
-- as settings local to the transaction: the application role, the owner role, and the
-- application role's password as a SCRAM verifier ('' keeps the password it has).
-- Must stay true: local to the transaction (set_config(..., true)); no plain password.
SELECT set_config('evora.role_app', :app::text, true) AS app,
       set_config('evora.role_owner', :owner::text, true) AS owner,
       set_config('evora.role_verifier', :verifier::text, true) IS NOT NULL AS verifier_set
