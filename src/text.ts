/** Text from outside (a request, a model file, a server's answer) put into a message. */

/** The text as a JSON string, cut after `max` characters, so that a message stays readable however long the text. */
export function quoteShort(text: string, max = 64): string {
  return JSON.stringify(text.length > max ? `${text.slice(0, max)}...` : text);
}
