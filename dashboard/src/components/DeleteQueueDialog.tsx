/**
 * The confirmation of DeleteQueue (DELETE /v1/queues/{name}): a native <dialog> (modal, traps
 * focus, Escape closes) like the bulk actions' (BulkActionDialog), focus on the safe choice,
 * so Enter or Escape right after opening deletes nothing. It says what the server will check
 * (only an empty queue goes: no job of any state, no schedule) and what goes with the queue
 * (its settings, its pause); the server's refusal (409, the line saying what is in the
 * queue) is shown in the page's status line by the caller, the queue left as it was.
 */
import { useEffect, useRef } from 'react';

/** Asks before deleting the queue `name`; closed while `open` is false. */
export function DeleteQueueDialog(props: { name: string; open: boolean; onConfirm: () => void; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (props.open && !dialog.open) dialog.showModal();
    if (!props.open && dialog.open) dialog.close();
  }, [props.open]);
  return (
    <dialog ref={ref} onClose={props.onClose} data-testid="delete-queue-dialog" aria-labelledby="delete-queue-title">
      <form
        method="dialog"
        onSubmit={(event) => {
          event.preventDefault();
          props.onConfirm();
          props.onClose();
        }}
      >
        <h2 id="delete-queue-title">
          Delete queue <span className="mono">{props.name}</span>?
        </h2>
        <p>
          This deletes the queue with its settings (attempts, backoff, limits, retention, pause). Only an empty queue is deleted:
          one with jobs of any state (finished ones too) or a schedule is refused, and left as it is.
        </p>
        <p className="muted">A job submitted into it later creates it again, with the default settings.</p>
        <div className="actions">
          <button type="button" onClick={props.onClose} data-testid="delete-queue-cancel" autoFocus>
            Keep it
          </button>
          <button type="submit" className="danger" data-testid="delete-queue-confirm" data-action="">
            Delete queue
          </button>
        </div>
      </form>
    </dialog>
  );
}
