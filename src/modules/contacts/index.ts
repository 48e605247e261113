/** The contacts module's public surface: the only file other modules import. */
export { Contact, ContactSchema } from './contacts.entity';
export { BulkJobSchema } from './bulk-jobs.entity';
export { ContactImportSchema } from './contact-imports.entity';
export { ContactCountDeltaSchema, ContactCountSchema } from './contact-counts.entity';
export { contactResponse } from './contacts.schemas';
export { applyData, dataMapSchema, resolveDataMap } from './data-map';
export type { ResolvedData } from './data-map';
export { runBulkJobChunk } from './bulk-jobs';
export { importNextSlice } from './contact-imports';
export { parseCsv } from './csv';
export { endSnooze, toContactDto, updateContact, updateContactSubscription, upsertContact } from './contacts.service';
export { contactTotal, upsertContactsAndInsertEvents } from './contacts.queries';
export type { ContactEventInput } from './contacts.queries';
export { contactRoutes } from './contacts.routes';
export { preferencePageRoutes } from './preference-pages';
