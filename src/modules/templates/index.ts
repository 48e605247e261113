/** The templates module's public surface: the only file other modules import. */
export { copiedMessage, messageProperties, Template, TemplateSchema } from './templates.entity';
export { TEMPLATE_TYPES, subjectSchema } from './templates.schemas';
export { getTemplate } from './templates.service';
export { templateRoutes } from './templates.routes';
export { BODY_FORMATS, type BodyFormat, checkedContent, invalidTemplate, sendableBody, templateErrorResponse } from './template-content';
export { contactToRender, PREVIEW_DESCRIPTION, previewMessage, previewResponse, previewSchema } from './message-preview';
export type { PreviewedMessage } from './message-preview';
