import { Migration } from '@mikro-orm/migrations';

/**
 * Automation workflows: definitions (steps and transitions), executions with each step's record,
 * and the outbox through which recorded events start executions and wake waiting ones.
 */
export class Migration20261121000300_automations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE workflows (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name text NOT NULL,
      description text,
      trigger_type text NOT NULL DEFAULT 'EVENT' CHECK (trigger_type IN ('EVENT')),
      trigger_config jsonb NOT NULL,
      enabled boolean NOT NULL DEFAULT false,
      allow_reentry boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX workflows_project_idx ON workflows (project_id, created_at)`);
    // Which enabled workflows an event starts: looked up for every recorded event.
    this.addSql(`CREATE INDEX workflows_trigger_idx ON workflows (project_id, (trigger_config->>'eventName')) WHERE enabled`);

    this.addSql(`CREATE TABLE workflow_steps (
      id uuid PRIMARY KEY,
      workflow_id uuid NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('TRIGGER', 'SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT')),
      name text NOT NULL,
      config jsonb NOT NULL DEFAULT '{}'::jsonb,
      position jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX workflow_steps_workflow_idx ON workflow_steps (workflow_id, created_at)`);
    this.addSql(`CREATE INDEX workflow_steps_template_idx ON workflow_steps ((config->>'templateId')) WHERE type = 'SEND_EMAIL'`);

    this.addSql(`CREATE TABLE workflow_transitions (
      id uuid PRIMARY KEY,
      workflow_id uuid NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
      from_step_id uuid NOT NULL REFERENCES workflow_steps(id) ON DELETE CASCADE,
      to_step_id uuid NOT NULL REFERENCES workflow_steps(id) ON DELETE CASCADE,
      branch text CHECK (branch IN ('yes', 'no')),
      outcome text CHECK (outcome IN ('event', 'timeout')),
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX workflow_transitions_workflow_idx ON workflow_transitions (workflow_id)`);

    this.addSql(`CREATE TABLE workflow_executions (
      id uuid PRIMARY KEY,
      workflow_id uuid NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      contact_id uuid NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      status text NOT NULL CHECK (status IN ('RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED')),
      context jsonb NOT NULL DEFAULT '{}'::jsonb,
      -- The definition as it was when the execution started: edits never reach a running execution.
      definition jsonb NOT NULL,
      current_step_id uuid,
      trigger_event_id uuid,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz
    )`);
    this.addSql(`CREATE INDEX workflow_executions_workflow_idx ON workflow_executions (workflow_id, created_at)`);
    this.addSql(`CREATE INDEX workflow_executions_active_idx ON workflow_executions (workflow_id) WHERE status IN ('RUNNING', 'WAITING')`);
    this.addSql(`CREATE INDEX workflow_executions_contact_idx ON workflow_executions (workflow_id, contact_id)`);

    this.addSql(`CREATE TABLE workflow_execution_steps (
      id uuid PRIMARY KEY,
      execution_id uuid NOT NULL REFERENCES workflow_executions(id) ON DELETE CASCADE,
      step_id uuid NOT NULL,
      type text NOT NULL,
      status text NOT NULL CHECK (status IN ('RUNNING', 'WAITING', 'COMPLETED', 'SKIPPED', 'FAILED', 'CANCELLED')),
      output jsonb,
      error text,
      started_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz
    )`);
    this.addSql(`CREATE INDEX workflow_execution_steps_execution_idx ON workflow_execution_steps (execution_id, started_at)`);

    // Executions waiting for an event of a contact: found by (project, contact, event name), never a scan.
    this.addSql(`CREATE TABLE workflow_waits (
      execution_id uuid PRIMARY KEY REFERENCES workflow_executions(id) ON DELETE CASCADE,
      project_id uuid NOT NULL,
      contact_id uuid NOT NULL,
      event_name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX workflow_waits_lookup_idx ON workflow_waits (project_id, contact_id, event_name)`);

    // A contact enters a workflow without re-entry only once, however many events race.
    this.addSql(`CREATE TABLE workflow_entries (
      workflow_id uuid NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
      contact_id uuid NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      PRIMARY KEY (workflow_id, contact_id)
    )`);

    // Written in the same transaction as the event (a trigger on events): starts and wake-ups are
    // never lost, whichever process recorded the event and whatever happens to it afterwards.
    this.addSql(`CREATE TABLE automation_outbox (
      id bigserial PRIMARY KEY,
      kind text NOT NULL CHECK (kind IN ('start', 'wake')),
      project_id uuid NOT NULL,
      contact_id uuid NOT NULL,
      event_id uuid NOT NULL,
      event_name text NOT NULL,
      event_data jsonb NOT NULL,
      workflow_id uuid,
      execution_id uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      claimed_until timestamptz
    )`);
    this.addSql(`CREATE FUNCTION route_events_to_automations() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE n integer;
      BEGIN
        INSERT INTO automation_outbox (kind, project_id, contact_id, event_id, event_name, event_data, workflow_id)
          SELECT 'start', e.project_id, e.contact_id, e.id, e.name, e.data, w.id
          FROM inserted e JOIN workflows w ON w.project_id = e.project_id AND w.enabled AND w.trigger_config->>'eventName' = e.name;
        GET DIAGNOSTICS n = ROW_COUNT;
        INSERT INTO automation_outbox (kind, project_id, contact_id, event_id, event_name, event_data, execution_id)
          SELECT 'wake', e.project_id, e.contact_id, e.id, e.name, e.data, w.execution_id
          FROM inserted e JOIN workflow_waits w ON w.project_id = e.project_id AND w.contact_id = e.contact_id AND w.event_name = e.name;
        IF n > 0 OR FOUND THEN PERFORM pg_notify('postbox_automation_outbox', ''); END IF;
        RETURN NULL;
      END $$`);
    this.addSql(`CREATE TRIGGER events_route_to_automations AFTER INSERT ON events REFERENCING NEW TABLE AS inserted
      FOR EACH STATEMENT EXECUTE FUNCTION route_events_to_automations()`);
  }
}
