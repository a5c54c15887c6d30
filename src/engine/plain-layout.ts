/**
 * The fixed simple template of models without one (the built-in lmsp-tiny): one line per
 * message, `Role: text`, ending with `Assistant:`. Tools are listed after the leading system
 * messages with their parameters as JSON, a call is written
 * `<tool_call>{"name": "NAME", "arguments": ARGUMENTS}</tool_call>`, and a tool result is a line
 * `Tool NAME (CALL_ID): OUTPUT`. Conversations without tools render as they always have.
 */
import type { ToolCallSyntax } from './grammar/constraint.js';
import type { EngineMessage, ToolDefinition } from './types.js';

export const PLAIN_TOOL_CALL_SYNTAX: ToolCallSyntax = {
  prefix: '<tool_call>{"name": "',
  paramsPrefix: '", "arguments": ',
  suffix: '}</tool_call>',
  betweenCalls: '\n',
};

const ROLE_LABELS = { system: 'System', developer: 'System', user: 'User', assistant: 'Assistant', tool: 'Tool' } as const;

function toolsBlock(tools: readonly ToolDefinition[]): string {
  const lines = tools.map((tool) => `- ${tool.name}: ${tool.description ? `${tool.description} ` : ''}Parameters: ${JSON.stringify(tool.parameters ?? { type: 'object', properties: {} })}`);
  const syntax = PLAIN_TOOL_CALL_SYNTAX;
  return `Tools:\n${lines.join('\n')}\nCall a tool by writing ${syntax.prefix}NAME${syntax.paramsPrefix}ARGUMENTS${syntax.suffix}`;
}

export function renderPlainLayout(messages: readonly EngineMessage[], tools: readonly ToolDefinition[]): string {
  const names = new Map<string, string>();
  const lines: string[] = [];
  let toolsWritten = tools.length === 0;
  for (const message of messages) {
    if (!toolsWritten && message.role !== 'system' && message.role !== 'developer') {
      lines.push(toolsBlock(tools));
      toolsWritten = true;
    }
    if (message.role === 'assistant') {
      const calls = (message.toolCalls ?? []).map((call) => {
        names.set(call.id, call.name);
        return `${PLAIN_TOOL_CALL_SYNTAX.prefix}${call.name}${PLAIN_TOOL_CALL_SYNTAX.paramsPrefix}${call.arguments}${PLAIN_TOOL_CALL_SYNTAX.suffix}`;
      });
      lines.push(`${ROLE_LABELS.assistant}: ${message.content}${calls.join(PLAIN_TOOL_CALL_SYNTAX.betweenCalls ?? '')}`);
    } else if (message.role === 'tool') {
      lines.push(`${ROLE_LABELS.tool} ${names.get(message.toolCallId) ?? 'result'} (${message.toolCallId}): ${message.content}`);
    } else {
      lines.push(`${ROLE_LABELS[message.role]}: ${message.content}`);
    }
  }
  if (!toolsWritten) lines.push(toolsBlock(tools));
  return `${lines.join('\n')}\n${ROLE_LABELS.assistant}:`;
}
