/**
 * Errors the handlers throw; the gRPC layer turns them into a status code plus, where Temporal sends
 * one, a `google.rpc.Status` in `grpc-status-details-bin` (the SDK decodes those into typed errors).
 */
import { Metadata, status } from '@grpc/grpc-js';
import { google, temporal } from '../proto';

export class RpcError extends Error {
  constructor(
    readonly code: status,
    message: string,
    /** Fully-qualified type name and encoded message of a Temporal error detail. */
    readonly detail?: { typeName: string; value: Uint8Array },
  ) {
    super(message);
  }

  /** Trailers for grpc-js: the status with its detail, as Temporal's server sends it. */
  metadata(): Metadata | undefined {
    if (!this.detail) return undefined;
    const md = new Metadata();
    const st = google.rpc.Status.encode({
      code: this.code,
      message: this.message,
      details: [{ type_url: `type.googleapis.com/${this.detail.typeName}`, value: this.detail.value }],
    }).finish();
    md.set('grpc-status-details-bin', Buffer.from(st));
    return md;
  }
}

const errordetails = temporal.api.errordetails.v1;

export const invalidArgument = (message: string) => new RpcError(status.INVALID_ARGUMENT, message);
export const notFound = (message: string) =>
  new RpcError(status.NOT_FOUND, message, {
    typeName: 'temporal.api.errordetails.v1.NotFoundFailure',
    value: errordetails.NotFoundFailure.encode({}).finish(),
  });
export const failedPrecondition = (message: string) => new RpcError(status.FAILED_PRECONDITION, message);
export const unimplemented = (message: string) => new RpcError(status.UNIMPLEMENTED, message);
export const unavailable = (message: string) => new RpcError(status.UNAVAILABLE, message);

export function namespaceNotFound(namespace: string): RpcError {
  return new RpcError(status.NOT_FOUND, `Namespace ${namespace} is not found.`, {
    typeName: 'temporal.api.errordetails.v1.NamespaceNotFoundFailure',
    value: errordetails.NamespaceNotFoundFailure.encode({ namespace }).finish(),
  });
}

export function workflowAlreadyStarted(workflowId: string, startRequestId: string, runId: string): RpcError {
  return new RpcError(status.ALREADY_EXISTS, `Workflow execution is already running. WorkflowId: ${workflowId}, RunId: ${runId}.`, {
    typeName: 'temporal.api.errordetails.v1.WorkflowExecutionAlreadyStartedFailure',
    value: errordetails.WorkflowExecutionAlreadyStartedFailure.encode({ startRequestId, runId }).finish(),
  });
}

export function namespaceAlreadyExists(namespace: string): RpcError {
  return new RpcError(status.ALREADY_EXISTS, `Namespace already exists: ${namespace}`, {
    typeName: 'temporal.api.errordetails.v1.NamespaceAlreadyExistsFailure',
    value: errordetails.NamespaceAlreadyExistsFailure.encode({}).finish(),
  });
}

export function queryFailed(message: string, failure?: temporal.api.failure.v1.IFailure | null): RpcError {
  return new RpcError(status.INVALID_ARGUMENT, message, {
    typeName: 'temporal.api.errordetails.v1.QueryFailedFailure',
    value: errordetails.QueryFailedFailure.encode({ failure: failure ?? undefined }).finish(),
  });
}

export const workflowCompleted = () => notFound('workflow execution already completed');
